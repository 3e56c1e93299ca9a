# frozen_string_literal: true

require_relative "../../../sidekiq"
require_relative "../../../sidekiq/api"
