# frozen_string_literal: true

# A Sidekiq Pro app's batch code, written in Pro's documented API (the Batches wiki: `Sidekiq::Batch`,
# `description=`, `on(:success, Class, options)`, `"Class#method"`, `batch.jobs`, `bid`, a job adding
# to its own batch, `Sidekiq::Batch::Status`), with the shim's require as its only new line.
require "queue/compat/sidekiq"
require "sidekiq"
require "redis"

module ProRecord
  def self.redis
    Thread.current[:pro_record] ||= Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
  end
end

class RowJob
  include Sidekiq::Job
  sidekiq_options queue: "import"

  def perform(row)
    if row == 1
      batch.jobs do
        RowJob.perform_async(100)
      end
    end
    ProRecord.redis.rpush("rows", "#{row}:#{bid}")
  end
end

class ImportCallbacks
  def on_complete(status, options)
    ProRecord.redis.rpush("pro_callbacks", "complete #{status.total} #{options["to"]}")
  end

  def shipped(status, options)
    ProRecord.redis.rpush("pro_callbacks", "success #{status.pending} #{status.failures} #{options["to"]}")
  end
end

def start_import
  batch = Sidekiq::Batch.new
  batch.description = "Import rows"
  batch.callback_queue = "import"
  batch.on(:complete, ImportCallbacks, "to" => "ops@example.com")
  batch.on(:success, "ImportCallbacks#shipped", "to" => "ops@example.com")
  batch.jobs do
    [1, 2, 3].each { |row| RowJob.perform_async(row) }
  end
  batch.bid
end
