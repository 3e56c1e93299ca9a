# frozen_string_literal: true

require "redis"

# Registers the same hooks on either configuration (`config.on` is the same call on both): each
# pushes "<event>" (":registered" when the process already was in `processes`) to "lifecycle:<kind>".
# Two blocks per event show the order they run in.
module LifecycleRecord
  EVENTS = %i[startup heartbeat quiet shutdown].freeze

  def self.register(config, kind)
    EVENTS.each do |event|
      [1, 2].each { |n| config.on(event) { record(kind, "#{event}-#{n}") } }
    end
  end

  def self.record(kind, name)
    redis = Redis.new(url: ENV.fetch("REDIS_URL"))
    registered = redis.smembers("processes").any? { |identity| identity.include?(":#{Process.pid}:") }
    redis.rpush("lifecycle:#{kind}", registered ? "#{name}:registered" : name)
  ensure
    redis&.close
  end
end
