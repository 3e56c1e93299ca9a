# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_priority"

# Priority under load: a server on `-q critical -q default -c 5` whose threads are all busy with a
# deep `default` queue of 20 ms jobs starts a `critical` job about as soon as a thread finishes its
# current job, not after the jobs it has already taken from `default`. The same holds with weights
# (`critical,3` / `default,1`), where `critical` comes first in most fetches.
#
# Critical jobs are pushed one at a time, 30-70 ms apart, while the fillers run. Each records when it
# started; its wait is that minus the time the spec pushed it (one machine, one clock). The goal is a
# wait of about one filler job (20 ms); the bound asserted is 100 ms on p99 (with 40 jobs, the
# largest wait).
RSpec.describe "critical jobs behind a busy default queue" do
  include_context "with server processes"

  let(:fillers) { 1_500 } # 6 s of work for 5 threads: more than the measurement takes
  let(:critical) { 40 }
  let(:bound) { 0.100 }

  {
    "strict order (-q critical -q default)" => %w[critical default],
    "weights (-q critical,3 -q default,1)" => %w[critical,3 default,1]
  }.each do |label, queues|
    it "starts critical jobs within 100 ms (p99) with #{label}" do
      PriorityFillerWorker.perform_bulk(Array.new(fillers) { [] })
      server = start_server("reliability_priority.rb", "-c", "5", *queues.flat_map { |q| ["-q", q] })
      wait_until("every thread to be running fillers") { redis.get("filler:ran").to_i >= 10 }

      pace = Random.new(RSpec.configuration.seed)
      critical.times do
        PriorityCriticalWorker.perform_async(Time.now.to_f)
        sleep(pace.rand(0.03..0.07)) # spacing the pushes is the scenario, not a wait for an event
      end
      started = wait_until("all #{critical} critical jobs to start") do
        list = list_of("critical:started")
        list if list.size == critical
      end
      # `default` only shrinks, so jobs left in it now were there throughout: no thread ever found it
      # empty, and every critical job had to be chosen over a waiting filler.
      fillers_left = redis.llen("queue:default")
      expect(server.stop.exitstatus).to eq(0)

      waits = started.map { |job| job["started_at"] - job["pushed_at"] }
      p50, p99 = percentile(waits, 50), percentile(waits, 99)
      report(format("priority, %s, -c 5: %d critical jobs waited p50 %.1f ms, p99 %.1f ms (max %.1f ms); " \
        "%d of %d fillers still queued", label, critical, p50 * 1e3, p99 * 1e3, waits.max * 1e3, fillers_left, fillers))

      expect(fillers_left).to be > 0, "the default queue drained: the measurement would prove nothing"
      expect(started.map { |job| job["pid"] }.uniq).to eq([server.pid])
      expect(waits).to all(be >= 0)
      expect(p99).to be < bound, format("p99 wait %.1f ms (p50 %.1f ms), goal < %d ms", p99 * 1e3, p50 * 1e3, bound * 1e3)
    end
  end
end
