# frozen_string_literal: true

# README "Moving from Sidekiq", as written, for spec/compat/readme_sidekiq_spec.rb: the app's
# HardWorker, loaded (`queue -r`, or `ruby -r` for its client) the way of SIDEKIQ=gem, the sidekiq gem
# kept (Bundler.require loads it), or SIDEKIQ=shim, the gem dropped for `require "queue/compat/sidekiq"`
# (the README's initializer line). README_BLOCKS: the section's ruby blocks, for the client to run.
require_relative "../support/readme"

README_BLOCKS = Readme.blocks("## Moving from Sidekiq", count: 4)
worker, _push, _api, shim = README_BLOCKS

case ENV.fetch("SIDEKIQ")
when "gem"
  require "sidekiq"
  Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
when "shim"
  require "queue"
  shim.run
end

worker.run
