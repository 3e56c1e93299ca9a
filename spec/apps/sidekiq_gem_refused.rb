# frozen_string_literal: true

# A Sidekiq 6.4.1 app whose Sidekiq.configure_server block sets what queue's server cannot honour
# (spec/compat/sidekiq_gem_server_spec.rb), chosen by REFUSED: `queue -r` this file must refuse to
# start, saying so.
require "sidekiq"

Sidekiq.configure_server do |config|
  case ENV.fetch("REFUSED")
  when "concurrency"
    config.redis = {url: ENV.fetch("REDIS_URL")}
    config.options[:concurrency] = 5
  when "pool" then config.redis = ConnectionPool.new(size: 1) { Redis.new(url: ENV.fetch("REDIS_URL")) }
  when "driver" then config.redis = {url: ENV.fetch("REDIS_URL"), driver: :ruby}
  end
end
