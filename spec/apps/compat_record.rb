# frozen_string_literal: true

# Shared by the compat apps of both servers (ours and the real Sidekiq's): records every job a worker
# ran in Redis, through the redis gem, so a compat spec can compare it with what was pushed. Loads
# neither our gem nor Sidekiq.
require "json"
require "redis"

module CompatRecord
  KEY = "compat:ran"

  def self.redis
    Thread.current[:compat_record_redis] ||= Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
  end

  # `runner` names the server that ran the job. `args` are recorded three ways: as JSON (readable
  # failures), as Ruby's inspect and as a Marshal dump, which tells an Integer from an equal Float,
  # and keeps every string's bytes and encoding.
  def self.ran(runner, worker, args, extra = {})
    job = worker.instance_variable_get(:@compat_job)
    redis.rpush(KEY, JSON.generate({
      "runner" => runner,
      "class" => worker.class.name,
      "jid" => worker.jid,
      "args" => args,
      "inspect" => args.inspect,
      "marshal" => [Marshal.dump(args)].pack("m0"),
      "job" => job
    }.merge(extra)))
  end

  # Server middleware with the interface both servers call (`call(worker, job, queue)`): hands the
  # job hash to the worker so the record can show what the server passed on.
  class Capture
    def call(worker, job, _queue)
      worker.instance_variable_set(:@compat_job, job)
      yield
    end
  end
end
