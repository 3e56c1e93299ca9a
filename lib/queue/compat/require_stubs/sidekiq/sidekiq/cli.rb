# frozen_string_literal: true

require_relative "../../../sidekiq"

raise JobQueue::Compat.unsupported("require \"sidekiq/cli\"", "run `bundle exec queue` (same flags, same YAML)")
