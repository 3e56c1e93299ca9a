# frozen_string_literal: true

# A GitLab-style Sidekiq app: the real Sidekiq 6.4.1 with gitlab-sidekiq-fetcher 0.8's reliable fetch
# (`sidekiq -r` this file), configured as the gem's README says. Its one worker records that it
# started and then never finishes, so its job sits in the fetcher's working list until the process is
# killed (spec/ecosystem/gitlab_sidekiq_fetcher_spec.rb) or stopped (the fetcher then puts it back).
# Loaded by `queue -r` with the gem kept, its configure_server block stops our server from starting.
require "sidekiq"
require "sidekiq-reliable-fetch"
require "json"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("REDIS_URL")}
  config.options[:semi_reliable_fetch] = true if ENV["GLFETCH_SEMI"] == "1"
  Sidekiq::ReliableFetch.setup_reliable_fetch!(config)
end

class GlfetchJob
  include Sidekiq::Worker

  def perform(label)
    Sidekiq.redis do |conn|
      conn.rpush("glfetch:started", JSON.generate("label" => label, "jid" => jid, "pid" => Process.pid))
    end
    loop { sleep 0.05 } # never finishes: only a kill or Sidekiq's shutdown ends it
  end
end
