# frozen_string_literal: true

# An app written for Sidekiq 6.4.1, unchanged: it requires sidekiq (its client and Sidekiq::Worker, not
# its server) and defines a Sidekiq::Worker class. Our server (`queue -r` this file) runs its jobs.
require "sidekiq"
require_relative "compat_record"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

class UnchangedSidekiqWorker
  include Sidekiq::Worker
  sidekiq_options queue: "unchanged", retry: 2

  def perform(*args)
    raise ArgumentError, "failing as asked" if args.first == "fail"

    CompatRecord.ran("unchanged", self, args, "logger" => logger.class.name)
  end
end
