# frozen_string_literal: true

# The app Puma serves in spec/reliability/embedded_puma_spec.rb: the blocking worker of
# reliability_block.rb (it records the pid that runs it), and JobQueue set up from REDIS_URL.
require_relative "../reliability_block"
