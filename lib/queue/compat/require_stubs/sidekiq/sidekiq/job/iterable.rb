# frozen_string_literal: true

# `require "sidekiq/job/iterable"` once queue/compat/sidekiq is loaded: the shim, not the gem.
require_relative "../../../../sidekiq"
