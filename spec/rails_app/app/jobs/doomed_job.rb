# frozen_string_literal: true

# Always fails with an error ActiveJob discards: recorded once, never retried.
class DoomedJob < ApplicationJob
  class Gone < StandardError; end

  discard_on Gone

  def perform(key)
    Entry.write!("doomed", key, executions)
    raise Gone, "nothing to do"
  end
end
