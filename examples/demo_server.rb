# frozen_string_literal: true

# What the demo's server process loads: the workers, under the demo's key namespace.
require_relative "demo_workers"

JobQueue.configure { |c| c.redis = {url: ENV.fetch("REDIS_URL"), namespace: "queue-demo"} }
