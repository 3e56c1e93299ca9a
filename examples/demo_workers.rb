# frozen_string_literal: true

# Workers of the demo (bin/demo). The server loads this file with `queue -r examples/demo_workers.rb`.
require "queue"

JobQueue.configure do |config|
  config.logger.level = Logger::WARN
end

# A blank job: the bulk of the demo workload.
class DemoWorker
  include JobQueue::Worker

  def perform(_n); end
end

# Fails on its first run, then succeeds when the retry comes round.
class FlakyWorker
  include JobQueue::Worker
  sidekiq_options retry: 3
  sidekiq_retry_in { 1 } # plus Sidekiq's jitter of up to 9 s

  def perform(marker)
    path = File.join(ENV.fetch("DEMO_DIR"), marker)
    return File.write("#{path}.done", "ok") if File.exist?(path)

    File.write(path, "failed once")
    raise "simulated failure (will succeed on retry)"
  end
end

# Runs a few seconds after it is enqueued.
class ReminderWorker
  include JobQueue::Worker

  def perform(text)
    File.write(File.join(ENV.fetch("DEMO_DIR"), "reminder"), text)
  end
end
