# frozen_string_literal: true

# The pushing process of the failover specs: pushes FailoverJob.perform_async(seq) for seq = 1, 2, …
# about every PACE_MS, until TARGET pushes have returned (or STOP_FILE appears), and appends one
# line per push to OUT: "ok seq jid time" for a push that returned, "fail seq ErrorClass time" for
# one that raised. A push is never sent again: a failed one is counted, and the next seq follows.
require_relative "failover"

target = Integer(ENV.fetch("TARGET"))
pace = Integer(ENV.fetch("PACE_MS", "2")) / 1000.0
out = File.open(ENV.fetch("OUT"), "a")
out.sync = true
acked = 0
seq = 0
until acked >= target || File.exist?(ENV.fetch("STOP_FILE"))
  seq += 1
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  begin
    jid = FailoverJob.perform_async(seq)
    out.write("ok #{seq} #{jid} #{Time.now.to_f}\n")
    acked += 1
  rescue JobQueue::Error => e
    out.write("fail #{seq} #{e.class} #{Time.now.to_f} #{e.message.tr("\n", " ")}\n")
  end
  left = pace - (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
  sleep left if left.positive? # pacing, so the pushes span the run
end
