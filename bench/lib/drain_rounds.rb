# frozen_string_literal: true

require_relative "clients"
require_relative "cpu"
require_relative "redis_server"
require_relative "report"

module Bench
  # The rounds of a drain benchmark (throughput.rb, ordered.rb), on a redis-server of its own. The
  # block drains every kind once for round `index` and returns {kind => measurements}; `run` returns
  # the rounds, each kind's medians, and the machine with the load averages around the rounds.
  module DrainRounds
    module_function

    def run(rounds, kinds)
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      before = Cpu.loadavg
      runs = (1..rounds).map { |index| yield redis, index }
      after = Cpu.loadavg
      summary = kinds.to_h { |k| [k, Report.medians(runs.map { |r| r[k] }, Report::DRAIN_FIELDS)] }
      [runs, summary, Report.machine(redis.version).merge("loadavg_before" => before, "loadavg_after" => after)]
    ensure
      redis&.stop
    end
  end
end
