# frozen_string_literal: true

# A Sidekiq 6.4.1 app whose Sidekiq.configure_server block sets what only Sidekiq's server reads
# (spec/compat/sidekiq_gem_server_spec.rb): `queue -r` this file must refuse to start, saying so.
require "sidekiq"

Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("REDIS_URL")}
  config.options[:concurrency] = 5
end
