# frozen_string_literal: true

# The app a real Sidekiq 6.4.1 process loads in spec/api/shards_spec.rb, pointed at shard jobs_b
# (SHARD_B_URL): its worker has the name of shards.rb's ShardBJob, so the jobs our client put on
# jobs_b run here. Runs are recorded in main's Redis (REDIS_URL) as shards.rb records them.
require "sidekiq"
require "redis"
require "json"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("SHARD_B_URL")}
  config.options[:poll_interval_average] = 1
end

class ShardBJob
  include Sidekiq::Worker

  def perform(*args)
    @record ||= Redis.new(url: ENV.fetch("REDIS_URL"))
    @record.rpush("shards:ran", JSON.generate("class" => self.class.name, "jid" => jid, "args" => args, "pid" => Process.pid,
      "runner" => "sidekiq #{Sidekiq::VERSION}"))
  end
end
