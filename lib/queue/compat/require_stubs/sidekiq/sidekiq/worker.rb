# frozen_string_literal: true

# `require "sidekiq/worker"` once queue/compat/sidekiq is loaded: the shim, not the gem.
require_relative "../../../sidekiq"
