# frozen_string_literal: true

module JobQueue
  module Ordered
    # How an ordered worker's payloads are stored in `payloads:<id>`. The engine never reads them: to
    # it they are bytes, and identical bytes merge.
    #
    # - JSON (the default): JSON's own types; Hash keys may be Strings or Symbols, and come back as
    #   Strings. Anything else raises ArgumentError at `perform_async`.
    # - Marshal (`payload_format :marshal`): any Ruby object, byte-compatible with Lowkiq. Opt-in only:
    #   `Marshal.load` of data read from Redis can run code, so whoever can write to Redis can run code
    #   in the server.
    module PayloadFormat
      # JSON payloads.
      module Json
        module_function

        def name = :json

        def dump(payload, worker)
          check!(payload, "payload", worker)
          JSON.generate(payload)
        end

        def load(bytes)
          JSON.parse(bytes.force_encoding(Encoding::UTF_8))
        end

        def check!(value, path, worker)
          case value
          when String, Integer, true, false, nil then nil
          when Float then reject!(value, path, worker, "a non-finite Float") unless value.finite?
          when Array then value.each_with_index { |v, i| check!(v, "#{path}[#{i}]", worker) }
          when Hash
            value.each do |k, v|
              reject!(k, "#{path} key #{k.inspect}", worker, "a #{k.class} key") unless k.is_a?(String) || k.is_a?(Symbol)
              check!(v, "#{path}[#{k.inspect}]", worker)
            end
          else reject!(value, path, worker, "a #{value.class}")
          end
        end

        def reject!(value, path, worker, what)
          raise ArgumentError,
            "#{worker}: #{path} is #{what} (#{value.inspect[0, 100]}); JSON payloads hold Strings, Integers, " \
            "finite Floats, true, false, nil, and Arrays or Hashes of them (or set `payload_format :marshal`)"
        end
      end

      # Marshal payloads, as Lowkiq writes them.
      module Marshal
        module_function

        def name = :marshal

        def dump(payload, _worker) = ::Marshal.dump(payload)

        def load(bytes) = ::Marshal.load(bytes) # rubocop:disable Security/MarshalLoad -- opted in by the worker
      end

      FORMATS = {json: Json, marshal: Marshal}.freeze
      # The key of the object that stands for a payload JSON cannot hold (see `printable`).
      RUBY = "$ruby"

      # A loaded payload as a JSON value, for output that is JSON (`queue ordered morgue`): itself
      # when it holds only JSON's types (Hash keys Strings or Symbols, as a JSON payload may have them,
      # Strings valid UTF-8, Floats finite), else `{"$ruby" => payload.inspect}`, a Marshal payload's
      # Ruby object shown as Ruby shows it, labelled so that it is not mistaken for a String payload.
      def self.printable(payload)
        json_value?(payload) ? payload : {RUBY => payload.inspect.dup.force_encoding(Encoding::UTF_8).scrub}
      end

      def self.json_value?(value)
        case value
        when Integer, true, false, nil then true
        when String then value.dup.force_encoding(Encoding::UTF_8).valid_encoding?
        when Float then value.finite?
        when Array then value.all? { |v| json_value?(v) }
        when Hash then value.all? { |k, v| (k.is_a?(Symbol) || (k.is_a?(String) && json_value?(k))) && json_value?(v) }
        else false
        end
      end

      def self.fetch(name)
        FORMATS.fetch(name) do
          raise ArgumentError, "unknown payload_format #{name.inspect}; use :json (the default) or :marshal"
        end
      end
    end
  end
end
