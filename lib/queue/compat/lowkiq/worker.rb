# frozen_string_literal: true

module Lowkiq
  # `extend Lowkiq::Worker` makes a JobQueue::OrderedWorker with Lowkiq's names: `shards_count`,
  # `batch_size`, `max_retry_count`, `queue_name`, `retry_in`, `retries_exhausted`, `perform`,
  # `perform_async` (inside `Lowkiq.client_middlewares`). Payloads are Marshal unless the app set
  # `Lowkiq.dump_payload`/`load_payload`, or the worker `payload_format :json`.
  module Worker
    include JobQueue::OrderedWorker

    # Registers the module as an ordered worker (served by `bundle exec queue`).
    def self.extended(base)
      super
      JobQueue::OrderedWorker.extended(base)
    end

    def perform_async(batch)
      Lowkiq.around_client(self, batch) { super(batch) }
    end

    def payload_codec
      @payload_format ? super : Lowkiq.payload_codec
    end

    def payload_format(format = nil)
      return super if format || @payload_format

      Lowkiq.payload_codec.name
    end

    def client_queue = raise(admin_api(:client_queue))

    def client_queries = raise(admin_api(:client_queries))

    def client_actions = raise(admin_api(:client_actions))

    private

    def admin_api(name)
      JobQueue::Compat.unsupported("#{self}.#{name}",
        "push with #{self}.perform_async; read and act on the queue with JobQueue::Ordered.stats, .morgue, " \
        ".requeue, .delete, .perform_all_jobs_now (or `bundle exec queue ordered ...`)")
    end
  end
end
