# frozen_string_literal: true

# The failover specs' app (spec/reliability/sentinel_failover_spec.rb), for the server and for the
# pushing process: config.redis finds the master through the sentinels SENTINELS names
# ("host:port,..."), with WAIT_REPLICAS / WAIT_TIMEOUT as wait_replicas: / wait_timeout: when set.
# Each run of a job appends "seq jid time pid" to RUNS (one write of one short line, O_APPEND: lines
# from the server's threads never interleave), outside Redis, so that a failover cannot lose the
# record of a run.
require "queue"

if ENV["SENTINELS"]
  JobQueue.configure do |c|
    redis = {url: "redis://mymaster/0", sentinels: ENV["SENTINELS"].split(","), role: :master}
    redis[:wait_replicas] = Integer(ENV["WAIT_REPLICAS"]) if ENV["WAIT_REPLICAS"]
    redis[:wait_timeout] = Integer(ENV["WAIT_TIMEOUT"]) if ENV["WAIT_TIMEOUT"]
    c.redis = redis
  end
end

class FailoverJob
  include JobQueue::Worker

  def perform(seq)
    sleep Float(ENV.fetch("FAILOVER_JOB_MS", "3")) / 1000 # a job of a few ms (longer: a server behind)
    File.open(ENV.fetch("RUNS"), "a") { |f| f.write("#{seq} #{jid} #{Time.now.to_f} #{Process.pid}\n") }
  end
end
