# frozen_string_literal: true

module JobQueue
  # `Worker.perform_inline` (and `perform_sync`), step for step as Sidekiq 6.4.1's: the job is built
  # and checked as for a push, client middleware runs (with the redis pool as its 4th argument), the
  # job goes through JSON and back (so `perform` sees what a server would: Symbols as Strings), then a
  # new worker with the job's jid runs `perform` inside the server middleware. No retry, no job log:
  # an exception is the caller's.
  module Inline
    module_function

    # Returns true, or nil when a client or server middleware stopped the job.
    def perform(item, config = JobQueue.config)
      job = Client.new(config).prepare(item) or return nil
      msg = JSON.parse(JSON.generate(job))
      worker = Object.const_get(msg["class"]).new
      worker.jid = msg["jid"] if worker.respond_to?(:jid=)
      ran = config.server_middleware_chain.invoke(worker, msg, msg["queue"]) do
        worker.perform(*msg["args"])
        true
      end
      ran ? true : nil
    end
  end
end
