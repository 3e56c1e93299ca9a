# frozen_string_literal: true

# Loads the Rust extension: from the gem's extension directory when installed, or from lib/queue
# after `rake compile` in a checkout.
begin
  require "queue/queue"
rescue LoadError => e
  begin
    require_relative "queue.#{RbConfig::CONFIG["DLEXT"]}"
  rescue LoadError
    raise LoadError, "queue's native extension is not built (#{e.message}); run `rake compile`"
  end
end
