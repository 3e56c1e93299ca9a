# frozen_string_literal: true

# `require "sidekiq/testing"` once queue/compat/sidekiq is loaded: JobQueue's test modes behind
# Sidekiq::Testing's names, and fake mode on, as the gem's file does.
require_relative "../../../sidekiq"
require_relative "../../../sidekiq/testing"
