# frozen_string_literal: true

module JobQueue
  # The default `config.feature_flag`: flags kept in Redis (the hash `jq:features`), such as
  # `disable_<queue>_deduplication`. A deduplicated push does not call it: the engine reads the flag
  # inside the push script, with no extra round trip. `queue feature enable|disable|list` sets them.
  class FeatureFlags
    def initialize(config)
      @config = config
    end

    # Whether the flag is on (any value but "0", "false" or "", as the push script reads it).
    def call(name)
      value = all[name.to_s]
      !value.nil? && !%w[0 false].include?(value) && !value.empty?
    end

    def enable(name)
      @config.engine.set_feature(name.to_s, true)
    end

    def disable(name)
      @config.engine.set_feature(name.to_s, false)
    end

    # Every flag that is set, name => value.
    def all
      @config.engine.features
    end
  end
end
