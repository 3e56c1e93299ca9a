# frozen_string_literal: true

# Run by spec/compat/sidekiq7_real_spec.rb as `ruby -I <SIDEKIQ7_SRC libs> spec/apps/sidekiq7_eval.rb CODE`:
# loads the real Sidekiq 7.3.10 (its client, API and Web) and spec/apps/sidekiq7_peer.rb, evaluates
# CODE and prints its value as JSON on the last line of stdout.
require "sidekiq"
require "sidekiq/api"
require "sidekiq/web"
require "sidekiq/metrics/query"
require "rack/mock"
require_relative "sidekiq7_peer"

# GET `path` of Sidekiq::Web; [status, body].
def sidekiq_web(path)
  response = Rack::MockRequest.new(Sidekiq::Web.new).get(path, "rack.session" => {})
  [response.status, response.body]
end

value = eval(ARGV.fetch(0), binding, "sidekiq7_eval") # rubocop:disable Security/Eval
puts JSON.generate(value)
