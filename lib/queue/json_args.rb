# frozen_string_literal: true

module JobQueue
  # Job arguments must survive a trip through JSON unchanged, so only JSON's own types are accepted:
  # String, Integer, finite Float, true, false, nil, and Arrays and Hashes (with String keys) of them.
  #
  # Two kinds of offence, each named by its path in the arguments ("args[1][\"ids\"][0]"):
  # - values JSON cannot hold at all (a binary String that is not UTF-8, a NaN or infinite Float)
  #   raise ArgumentError always;
  # - values JSON would turn into something else (a Symbol, a Time, a Hash with Symbol keys, any other
  #   object) are Sidekiq's "complex arguments": they raise ArgumentError in the default :raise mode,
  #   are logged in :warn mode and pass silently with false (JobQueue.strict_args!).
  module JsonArgs
    NATIVE = "arguments must be JSON-native: String, Integer, Float, true, false, nil, " \
      "and Arrays or Hashes with String keys of those"

    module_function

    def check!(args, job_class, mode = JobQueue.config.strict_args)
      complex = nil
      args.each_with_index do |arg, i|
        found = check_value!(arg, "args[#{i}]", job_class)
        complex ||= found
      end
      complain(complex, job_class, mode) if complex
    end

    # Raises for what JSON cannot hold; returns [path, description, value] of the first value JSON
    # would change, or nil.
    def check_value!(value, path, job_class)
      case value
      when String
        unstorable!(value, path, job_class, "a String that is not valid UTF-8 (#{value.encoding})") unless utf8_able?(value)
      when Integer, true, false, nil
        nil
      when Float
        unstorable!(value, path, job_class, "a non-finite Float") unless value.finite?
      when Array
        value.each_with_index.reduce(nil) { |found, (v, i)| check_value!(v, "#{path}[#{i}]", job_class) || found }
      when Hash
        value.reduce(nil) do |found, (k, v)|
          key_path = "#{path} key #{k.inspect[0, 100]}"
          found ||= [key_path, "a #{k.class} key", k] unless k.is_a?(String)
          found = check_value!(k, key_path, job_class) || found if k.is_a?(String)
          check_value!(v, "#{path}[#{k.inspect[0, 100]}]", job_class) || found
        end
      else
        [path, "a #{value.class}", value]
      end
    end

    # A String JSON can write: valid in its encoding, and if binary, plain ASCII.
    def utf8_able?(string)
      string.encoding == Encoding::BINARY ? string.ascii_only? : string.valid_encoding?
    end

    def complain((path, what, value), job_class, mode)
      message = "#{job_class} job argument #{path} is #{what} (#{value.inspect[0, 100]})"
      case mode
      when :raise
        raise ArgumentError, "#{message}; #{NATIVE}"
      when :warn
        JobQueue.logger.warn("#{message}: it does not serialize to JSON safely and arrives in perform as " \
          "#{json_form(value)}; #{NATIVE} (JobQueue.strict_args! raises instead)")
      end
    end

    def json_form(value)
      JSON.generate([value])[1...-1][0, 100]
    rescue StandardError # JSON::GeneratorError, or an object whose to_s or to_json raises
      "(no JSON form)"
    end

    def unstorable!(value, path, job_class, what)
      raise ArgumentError, "#{job_class} job argument #{path} is #{what} (#{value.inspect[0, 100]}); #{NATIVE}"
    end
  end
end
