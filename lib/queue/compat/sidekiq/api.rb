# frozen_string_literal: true

require_relative "../../api"

# `require "sidekiq/api"` under the shim: Sidekiq's API classes are JobQueue's, which keep their
# method names and return shapes (README, "Inspecting from Ruby and the CLI").
module Sidekiq
  API_CLASSES = %i[Stats Queue JobRecord SortedEntry SortedSet JobSet ScheduledSet RetrySet DeadSet
    ProcessSet Process Workers].freeze

  API_CLASSES.each do |name|
    const_set(name, JobQueue.const_get(name, false)) unless const_defined?(name, false)
  end
end
