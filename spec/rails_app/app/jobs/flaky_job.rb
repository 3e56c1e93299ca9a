# frozen_string_literal: true

# Fails its first attempt; ActiveJob's retry_on enqueues it again. Records every attempt.
class FlakyJob < ApplicationJob
  class Flake < StandardError; end

  retry_on Flake, wait: 0, attempts: 2

  def perform(key)
    Entry.write!("flaky", key, executions)
    raise Flake, "first attempt" if executions == 1
  end
end
