# frozen_string_literal: true

# The Sidekiq 7.3 and 8.0 wire fixtures in spec/fixtures/sidekiq8 (see its README), for the specs of
# what those versions write (spec/api/sidekiq8_spec.rb, spec/web/sidekiq8_pages_spec.rb).
module Sidekiq8Fixtures
  DIR = File.expand_path("../fixtures/sidekiq8", __dir__)

  module_function

  def raw(name) = File.read(File.join(DIR, name)).strip

  def job(name) = JSON.parse(raw(name))

  # Epoch milliseconds now, as Sidekiq 8 takes them (CLOCK_REALTIME, :millisecond).
  def now_ms = ::Process.clock_gettime(::Process::CLOCK_REALTIME, :millisecond)

  # The Time of Sidekiq 8's integer epoch milliseconds, exactly.
  def time_of_ms(ms) = Time.at(ms / 1000, ms % 1000, :millisecond).utc

  # Registers a process hash with `info` as Sidekiq 7.3/8.0 write it, beating now.
  def register_process(redis, info_json)
    identity = JSON.parse(info_json).fetch("identity")
    redis.sadd?("processes", identity)
    redis.hset(identity, "info", info_json, "busy", "1", "beat", Time.now.to_f.to_s, "quiet", "false", "rss", "123456", "rtt_us", "250")
    redis.expire(identity, 60)
    identity
  end
end
