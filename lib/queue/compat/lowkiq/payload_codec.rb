# frozen_string_literal: true

module JobQueue
  module Compat
    # The payload codec of Lowkiq::Worker modules: Marshal, Lowkiq's own format, unless the app set
    # `Lowkiq.dump_payload`/`load_payload` to other callables (then those), or the worker chose
    # `payload_format :json`.
    class LowkiqPayloadCodec
      def initialize(dump, load)
        @dump = dump
        @load = load
      end

      def name = :custom

      def dump(payload, _worker)
        bytes = @dump.call(payload)
        raise ArgumentError, "Lowkiq.dump_payload returned #{bytes.class}, not a String" unless bytes.is_a?(String)

        bytes
      end

      def load(bytes) = @load.call(bytes)
    end
  end
end
