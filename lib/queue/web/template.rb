# frozen_string_literal: true

require "erb"
require "cgi"

module JobQueue
  class Web
    # Text that is already HTML (a helper's output, a rendered partial): written as it is. Everything
    # else a template writes with `<%= %>` is escaped.
    class SafeString < String
      # ERB calls `to_s` on every value it writes; a plain String's `to_s` on a subclass would drop the
      # mark.
      def to_s = self
    end

    # The buffer a template writes to: literal template text as it is, values escaped unless safe.
    class Buffer
      def initialize
        @out = String.new(encoding: Encoding::UTF_8)
      end

      def <<(text)
        @out << text
        self
      end

      def emit(value)
        @out << (value.is_a?(SafeString) ? value : CGI.escapeHTML(Buffer.utf8(value.to_s)))
        self
      end

      # Job data arrives as bytes; shown as UTF-8, invalid bytes replaced.
      def self.utf8(text)
        return text if text.encoding == Encoding::UTF_8 && text.valid_encoding?

        text.dup.force_encoding(Encoding::UTF_8).scrub
      end

      def to_s = SafeString.new(@out)
    end

    # ERB whose `<%= %>` escapes by default; `<%= raw(x) %>` (or a SafeString) writes HTML.
    class Template < ERB
      def self.load(path)
        new(File.read(path, encoding: Encoding::UTF_8), trim_mode: "-").tap { |t| t.filename = path }
      end

      def set_eoutvar(compiler, eoutvar = "_erbout")
        compiler.put_cmd = "#{eoutvar}.<<"
        compiler.insert_cmd = "#{eoutvar}.emit"
        compiler.pre_cmd = ["#{eoutvar} = ::JobQueue::Web::Buffer.new"]
        compiler.post_cmd = ["#{eoutvar}.to_s"]
      end
    end
  end
end
