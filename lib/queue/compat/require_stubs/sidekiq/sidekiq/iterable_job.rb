# frozen_string_literal: true

# `require "sidekiq/iterable_job"` once queue/compat/sidekiq is loaded: the shim, not the gem.
require_relative "../../../sidekiq"
