# frozen_string_literal: true

# Loaded by the specs in spec/web: the dashboard (JobQueue::Web) driven through Rack::Test, as a
# browser would drive it (a session cookie, forms carrying the page's CSRF token), against the
# suite's Redis filled by the real engine.
require "rack/test"
require "queue/web"

module WebHelpers
  include Rack::Test::Methods

  def app = JobQueue::Web.new(session_secret: "spec" * 16)

  # GETs a page, expecting 200; returns its HTML.
  def page(path)
    get(path)
    expect([path, last_response.status]).to eq([path, 200])
    last_response.body
  end

  # The CSRF token the session's pages carry (in their forms, and in the layout's meta tag).
  def csrf_token
    get "/ordered"
    last_response.body[/<meta name="csrf-token" content="([^"]+)">/, 1] or raise "no CSRF token on /ordered"
  end

  # POSTs a form with the session's token; follows the redirect and returns the flash shown.
  def submit(path, fields = {})
    post(path, fields.merge("authenticity_token" => csrf_token))
    expect([path, last_response.status]).to eq([path, 303])
    follow_redirect!
    expect(last_response.status).to eq(200)
    last_response.body[%r{<p class="flash" role="status">(.*?)</p>}m, 1]
  end
end

RSpec.configure do |config|
  config.include WebHelpers, file_path: %r{spec/web/}
end
