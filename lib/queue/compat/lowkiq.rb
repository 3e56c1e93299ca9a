# frozen_string_literal: true

# `require "queue/compat/lowkiq"`: an app written for Lowkiq keeps its `extend Lowkiq::Worker`
# modules and its `Lowkiq.*` settings after it drops the lowkiq gem; workers become
# JobQueue::OrderedWorkers (same Redis layout), settings land on JobQueue.config, and
# `bundle exec queue` serves them. Payloads stay Marshal, Lowkiq's format (README, "Moving from
# Lowkiq"). What has no equivalent raises NotImplementedError (or ArgumentError) naming what to use.
#
# Once loaded, the app's own `require "lowkiq"` loads this shim's stub instead of the gem.
require_relative "../compat"

if defined?(Lowkiq) && !(Lowkiq.respond_to?(:queue_compat?) && Lowkiq.queue_compat?)
  raise JobQueue::Compat::GemLoaded,
    "queue/compat/lowkiq: the lowkiq gem is already loaded; the shim is for apps without it (its " \
    "Lowkiq::Worker modules become queue's ordered workers). Drop the lowkiq gem (and its require), or " \
    "remove `require \"queue/compat/lowkiq\"`."
end

require_relative "lowkiq/payload_codec"
require_relative "lowkiq/worker"
require_relative "lowkiq/settings"

JobQueue::Compat.add_require_stubs("lowkiq")
