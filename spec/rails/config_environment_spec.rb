# frozen_string_literal: true

# `bundle exec queue` in spec/rails_app reads the section of config/queue.yml named after the
# environment: -e, else APP_ENV, RAILS_ENV or RACK_ENV, else development, as Sidekiq 6.4 does (the app
# boots in that environment too). The file sets 3 threads at the top and 2 under development:.
RSpec.describe "config/queue.yml's environment section in a Rails app" do
  def started_threads(*args, env:)
    RailsApp.server(*args, env: env).watch do |server|
      line = wait_until("the server to start") { server.output[/started as \S+: (\d+) threads/, 1] }
      expect(server.stop.exitstatus).to eq(0)
      Integer(line)
    end
  end

  it "falls back to the development section when no environment is given" do
    expect(started_threads(env: {"RAILS_ENV" => nil, "RACK_ENV" => nil, "APP_ENV" => nil})).to eq(2)
  end

  it "reads the section of RAILS_ENV, APP_ENV or -e, and only the top level when there is none" do
    expect(started_threads(env: {"RAILS_ENV" => "test"})).to eq(3)
    expect(started_threads(env: {"RAILS_ENV" => nil, "APP_ENV" => "development"})).to eq(2)
    expect(started_threads("-e", "development", env: {"RAILS_ENV" => "test"})).to eq(2)
  end
end
