# frozen_string_literal: true

module JobQueue
  # Job arguments must survive a trip through JSON unchanged, so only JSON's own types are accepted:
  # String, Integer, finite Float, true, false, nil, and Arrays and Hashes (with String keys) of them.
  # Anything else raises ArgumentError at the call that enqueued it, naming the offending argument.
  module JsonArgs
    module_function

    def check!(args, job_class)
      args.each_with_index { |arg, i| check_value!(arg, "args[#{i}]", job_class) }
    end

    def check_value!(value, path, job_class)
      case value
      when String, Integer, true, false, nil
        nil
      when Float
        reject!(value, path, job_class, "a non-finite Float") unless value.finite?
      when Array
        value.each_with_index { |v, i| check_value!(v, "#{path}[#{i}]", job_class) }
      when Hash
        value.each do |k, v|
          reject!(k, "#{path} key #{k.inspect}", job_class, "a #{k.class} key") unless k.is_a?(String)
          check_value!(v, "#{path}[#{k.inspect}]", job_class)
        end
      else
        reject!(value, path, job_class, "a #{value.class}")
      end
    end

    def reject!(value, path, job_class, what)
      raise ArgumentError,
        "#{job_class} job argument #{path} is #{what} (#{value.inspect[0, 100]}); " \
        "arguments must be JSON-native: String, Integer, Float, true, false, nil, " \
        "and Arrays or Hashes with String keys of those"
    end
  end
end
