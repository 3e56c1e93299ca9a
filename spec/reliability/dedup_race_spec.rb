# frozen_string_literal: true

require_relative "support"

# Two processes of eight threads push the same idempotent job 1,000 times while a server runs it: at
# most one copy is ever queued, and with reschedule_once the work of the last push is done after it.
RSpec.describe "deduplication under concurrent pushes", :reliability do
  include_context "with server processes"

  let(:pushes) { 1_000 }

  def pushers(worker)
    app = File.join(ServerProcess::APPS, "api_dedup.rb")
    code = "require #{app.inspect}; dedup_race_push(#{worker}, #{pushes / 2}, 8)"
    Array.new(2) do
      Process.spawn({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, "-I", File.join(ServerProcess::ROOT, "lib"), "-e", code)
    end
  end

  # Samples the queue's length until the pushers exit; returns [largest length, samples].
  def sample_queue_while(pids)
    largest = 0
    samples = 0
    until pids.empty?
      largest = [largest, redis.llen("queue:default")].max
      samples += 1
      pids.reject! do |pid|
        _, status = Process.waitpid2(pid, Process::WNOHANG)
        expect(status.success?).to be(true) if status
        status
      end
    end
    [largest, samples]
  end

  def wait_until_idle
    wait_until("the queue to drain and every key to be released") do
      redis.llen("queue:default").zero? && held_jobs.zero? && redis.keys("duplicate:*").empty?
    end
  end

  it "never queues two copies (until_executing)" do
    identity_of(start_server("api_dedup.rb", "-c", "4"))
    largest, samples = sample_queue_while(pushers("DedupRaceWorker"))
    wait_until_idle
    runs = list_of("dedup:started").size
    report("  until_executing: #{pushes} pushes, #{runs} runs, largest queue #{largest} in #{samples} samples")
    expect(largest).to be <= 1
    expect(samples).to be > 10
    expect(runs).to be_between(2, pushes)
  end

  it "does the last push's work after it (until_executed, reschedule_once)" do
    identity_of(start_server("api_dedup.rb", "-c", "4"))
    largest, samples = sample_queue_while(pushers("DedupRaceRescheduleWorker"))
    last_push = redis.lrange("dedup:race:last_push", 0, -1).map(&:to_f).max
    wait_until_idle
    starts = list_of("dedup:started").map { |run| run["at"] }
    rescheduled = list_of("dedup:started").count { |run| run["rescheduled_once"] }
    report("  until_executed + reschedule_once: #{pushes} pushes, #{starts.size} runs (#{rescheduled} rescheduled), largest queue #{largest} in #{samples} samples")
    expect(largest).to be <= 1
    expect(starts.max).to be > last_push
  end
end
