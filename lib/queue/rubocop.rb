# frozen_string_literal: true

# RuboCop cops for apps that use queue. In the app's .rubocop.yml:
#
#   require:
#     - queue/rubocop
#
# Loads RuboCop itself, never the queue gem (no native extension is needed to lint).
require "rubocop"
require_relative "rubocop/idempotent_worker"
