# frozen_string_literal: true

module JobQueue
  VERSION = "0.1.0"
end
