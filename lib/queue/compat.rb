# frozen_string_literal: true

require_relative "../queue"

module JobQueue
  # Drop-in shims for apps that drop the sidekiq or lowkiq gem (`require "queue/compat/sidekiq"`,
  # `require "queue/compat/lowkiq"`): their `Sidekiq::*` / `Lowkiq::*` calls map onto JobQueue's.
  module Compat
    # The real gem is loaded: its classes already run unchanged, the shim would only clash with them.
    class GemLoaded < Error; end

    class << self
      # Puts a shim's require stubs (`sidekiq.rb`, `sidekiq/testing.rb`, …) first on the load path,
      # so an app's own `require "sidekiq"` loads the shim's stub, not the gem. Only a shim that was
      # required does this: without it, `require "sidekiq"` finds the real gem as before.
      def add_require_stubs(name)
        dir = File.expand_path("compat/require_stubs/#{name}", __dir__)
        $LOAD_PATH.unshift(dir) unless $LOAD_PATH.include?(dir)
      end

      # An error for a name the shim does not provide: what to use instead.
      def unsupported(what, instead)
        NotImplementedError.new("#{what} is not supported by queue's compat shim; #{instead}")
      end
    end
  end
end
