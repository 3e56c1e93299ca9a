# frozen_string_literal: true

# `require "sidekiq/testing/inline"`: the test modes, with inline mode on.
require_relative "../testing"

Sidekiq::Testing.inline!
