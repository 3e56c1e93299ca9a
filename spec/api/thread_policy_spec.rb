# frozen_string_literal: true

require_relative "../apps/thread_policy"

# A server's job threads run under Linux's SCHED_BATCH (config.job_thread_policy, :batch by default):
# a job thread that wakes up does not preempt the thread holding the GVL (ARCHITECTURE.md, "Job
# threads under SCHED_BATCH"). The engine's threads and the main thread keep the policy the process
# started with.
RSpec.describe "scheduling policy of a server's threads", if: RUBY_PLATFORM.include?("linux") do
  let(:redis) { TestRedis.client }
  let(:sched_other) { 0 }
  let(:sched_batch) { 3 }

  # {thread name => [policy, ...]} of every thread of process `pid` (field 41 of its stat).
  def policies(pid)
    Dir.glob("/proc/#{pid}/task/*").each_with_object(Hash.new { |h, k| h[k] = [] }) do |task, all|
      name = File.read(File.join(task, "comm")).strip
      fields = File.read(File.join(task, "stat")).rpartition(")").last.split
      all[name] << Integer(fields[38]) # fields after the name start at the 3rd
    rescue Errno::ENOENT, Errno::ESRCH
      next
    end
  end

  # Starts a -c 4 server with `env`, runs 20 jobs on it, and returns the
  # policies of its threads once every processor thread has set its own.
  def server_policies(env, wanted)
    server = start_server(app: "thread_policy.rb", args: ["-c", "4"], env: env)
    JobQueue::Client.push_bulk("class" => "ThreadNameWorker", "args" => Array.new(20) { [] })
    wait_until("20 jobs") { redis.llen("ran:threads") == 20 }
    found = wait_until("4 processor threads under policy #{wanted}") do
      all = policies(server.pid)
      processors = all.select { |name, _| name.start_with?("queue-processor") }.values.flatten
      all if processors.size == 4 && processors.all?(wanted)
    end
    expect(server.stop.exitstatus).to eq(0)
    found
  end

  it "puts the job threads under SCHED_BATCH by default and leaves the others alone" do
    found = server_policies({}, sched_batch)
    expect(redis.lrange("ran:threads", 0, -1)).to all(start_with("queue-processor-"))
    others = found.reject { |name, _| name.start_with?("queue-processor") }
    expect(others.keys).to include("queue-engine")
    expect(others.values.flatten).to all(eq(sched_other))
  end

  it "leaves every thread under the default policy when job_thread_policy is nil" do
    found = server_policies({"POLICY" => "off"}, sched_other)
    expect(found.values.flatten).to all(eq(sched_other))
  end
end
