# frozen_string_literal: true

# Waits for a condition observable in Redis or the file system (an event with no callback to hook):
# polls it until it holds, and fails the example with a description if it does not within `timeout`.
# Tests never sleep a fixed time instead.
module Wait
  def wait_until(description = "condition", timeout: 30, interval: 0.02)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      result = yield
      return result if result

      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        raise RSpec::Expectations::ExpectationNotMetError, "timed out after #{timeout}s waiting for #{description}"
      end

      sleep interval
    end
  end
end

RSpec.configure { |c| c.include Wait }
