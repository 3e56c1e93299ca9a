# frozen_string_literal: true

# The app Puma serves in spec/reliability/embedded_puma_spec.rb, with README "Embedded mode (Puma)"'s
# config/puma.rb: the blocking worker of reliability_block.rb (it records the pid that runs it), and
# JobQueue set up from REDIS_URL, with the shutdown timeout from QUEUE_TIMEOUT (configure_embed keeps
# it).
require_relative "../reliability_block"

JobQueue.configure { |config| config.timeout = Float(ENV.fetch("QUEUE_TIMEOUT", "25")) }
