# frozen_string_literal: true

# Puma's config for spec/reliability/embedded_puma_spec.rb, as README "Embedded mode (Puma)" shows
# it: each worker runs a queue server beside its HTTP threads, started once the worker has booted
# and stopped (gracefully) when the worker shuts down. The app is preloaded, so JobQueue and the
# workers are loaded before the fork.
workers 1
threads 1, 2
preload_app!

embedded = nil

on_worker_boot do
  embedded = JobQueue.configure_embed do |config|
    config.concurrency = 2
    config.queues = %w[critical default]
    config.timeout = Float(ENV.fetch("QUEUE_TIMEOUT", "25"))
  end
  embedded.run
end

on_worker_shutdown do
  embedded&.stop
end
