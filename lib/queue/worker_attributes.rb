# frozen_string_literal: true

module JobQueue
  # The attributes a GitLab-style worker declares about itself (see ApplicationWorker). Each is
  # checked when it is declared, inherited by subclasses, and read with a `get_*` method.
  #
  #   urgency :high                       # :high, :low (default) or :throttled
  #   feature_category :source_code_management
  #   worker_has_external_dependencies!
  #   worker_resource_boundary :cpu       # :cpu, :memory or :unknown (default)
  #   weight 2                            # default 1; the server's share for this queue
  #   tags :exclude_from_kubernetes
  #   loggable_arguments 1, 3             # argument positions shown in JSON job logs
  #
  # Urgency :high cannot be combined with external dependencies, nor with a memory-bound worker; the
  # declaration that makes the combination raises ArgumentError, whichever comes second.
  module WorkerAttributes
    VALID_URGENCIES = %i[high low throttled].freeze
    VALID_RESOURCE_BOUNDARIES = %i[cpu memory unknown].freeze
    MAX_WEIGHT = Configuration::MAX_WEIGHT

    def urgency(value)
      check!(:urgency, value, VALID_URGENCIES.include?(value), "one of #{VALID_URGENCIES.map(&:inspect).join(", ")}")
      check_combination!(urgency: value)
      set_worker_attribute(:urgency, value)
    end

    def get_urgency
      get_worker_attribute(:urgency) || :low
    end

    def feature_category(value)
      valid = (value.is_a?(Symbol) || value.is_a?(String)) && !value.to_s.strip.empty?
      check!(:feature_category, value, valid, "a non-empty Symbol or String")
      set_worker_attribute(:feature_category, value.to_sym)
    end

    def get_feature_category
      get_worker_attribute(:feature_category)
    end

    def worker_has_external_dependencies!
      check_combination!(external_dependencies: true)
      set_worker_attribute(:external_dependencies, true)
    end

    def worker_has_external_dependencies?
      get_worker_attribute(:external_dependencies) == true
    end

    def worker_resource_boundary(value)
      check!(:worker_resource_boundary, value, VALID_RESOURCE_BOUNDARIES.include?(value),
        "one of #{VALID_RESOURCE_BOUNDARIES.map(&:inspect).join(", ")}")
      check_combination!(resource_boundary: value)
      set_worker_attribute(:resource_boundary, value)
    end

    def get_worker_resource_boundary
      get_worker_attribute(:resource_boundary) || :unknown
    end

    def weight(value)
      check!(:weight, value, value.is_a?(Integer) && value.between?(1, MAX_WEIGHT), "an Integer from 1 to #{MAX_WEIGHT}")
      set_worker_attribute(:weight, value)
    end

    def get_weight
      get_worker_attribute(:weight) || 1
    end

    def tags(*values)
      valid = values.all? { |v| (v.is_a?(Symbol) || v.is_a?(String)) && !v.to_s.empty? }
      check!(:tags, values, valid, "Symbols or Strings")
      set_worker_attribute(:tags, values.map(&:to_sym).freeze)
    end

    def get_tags
      get_worker_attribute(:tags) || []
    end

    # With positions, declares which non-numeric arguments JSON job logs may show (numeric ones always
    # are); without, returns the positions declared.
    def loggable_arguments(*positions)
      return get_worker_attribute(:loggable_arguments) || [] if positions.empty?

      check!(:loggable_arguments, positions, positions.all? { |i| i.is_a?(Integer) && i >= 0 }, "argument positions (Integers >= 0)")
      set_worker_attribute(:loggable_arguments, positions.uniq.freeze)
    end

    # Every attribute of this worker (own and inherited), for reports and queue selection.
    def worker_attributes
      {
        urgency: get_urgency, feature_category: get_feature_category,
        has_external_dependencies: worker_has_external_dependencies?,
        resource_boundary: get_worker_resource_boundary, weight: get_weight, tags: get_tags
      }
    end

    # This class's own value of an attribute, else its nearest ancestor's.
    def get_worker_attribute(name)
      own = @worker_attributes
      return own[name] if own&.key?(name)

      superclass.respond_to?(:get_worker_attribute) ? superclass.get_worker_attribute(name) : nil
    end

    private

    # Routing rules match attributes, so a change redoes every worker's cached options.
    def set_worker_attribute(name, value)
      (@worker_attributes ||= {})[name] = value
      Worker.options_changed!
    end

    def check!(attribute, value, valid, expected)
      raise ArgumentError, "#{name || inspect}: #{attribute} must be #{expected}, got #{value.inspect}" unless valid
    end

    # Urgency :high needs predictable, short jobs: no external services, no memory-bound work.
    def check_combination!(changes)
      urgency = changes.fetch(:urgency) { get_urgency }
      return unless urgency == :high

      if changes.fetch(:external_dependencies) { worker_has_external_dependencies? }
        raise ArgumentError, "#{name || inspect}: a worker cannot have urgency :high and external dependencies " \
          "(worker_has_external_dependencies!); jobs with external dependencies have no latency guarantee"
      end
      return unless changes.fetch(:resource_boundary) { get_worker_resource_boundary } == :memory

      raise ArgumentError, "#{name || inspect}: a worker cannot have urgency :high and worker_resource_boundary :memory; " \
        "memory-bound jobs cause GC pauses that break high-urgency latency targets"
    end
  end
end
