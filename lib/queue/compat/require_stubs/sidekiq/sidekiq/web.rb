# frozen_string_literal: true

require_relative "../../../sidekiq"

raise JobQueue::Compat.unsupported("require \"sidekiq/web\"",
  "mount the real Sidekiq::Web from an app that has the sidekiq gem, on the same Redis: it reads queue's data " \
  "(README, \"Moving from Sidekiq\")")
