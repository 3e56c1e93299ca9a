# frozen_string_literal: true

module JobQueue
  class Web
    # Routes: a method, a pattern with `:name` segments, the page method that answers, and params the
    # route fixes. The first
    # match wins; a segment matches one path segment (URL-decoded).
    class Router
      Route = Struct.new(:verb, :regexp, :names, :action, :defaults)

      def initialize
        @routes = []
      end

      def get(pattern, action, defaults = {}) = add("GET", pattern, action, defaults)

      def post(pattern, action, defaults = {}) = add("POST", pattern, action, defaults)

      # [action, params] for a request, or nil. HEAD is answered as GET.
      def match(verb, path)
        verb = "GET" if verb == "HEAD"
        @routes.each do |route|
          next unless route.verb == verb && (m = route.regexp.match(path))

          return [route.action, route.defaults.merge(route.names.zip(m.captures.map { |c| Rack::Utils.unescape_path(c) }).to_h)]
        end
        nil
      end

      # True when some route takes the path with another method (a 405, not a 404).
      def path?(path) = @routes.any? { |r| r.regexp.match?(path) }

      private

      def add(verb, pattern, action, defaults)
        names = pattern.scan(/:(\w+)/).flatten
        regexp = Regexp.new("\\A#{pattern.gsub(/:\w+/, "([^/]+)")}\\z")
        @routes << Route.new(verb, regexp, names, action, defaults)
      end
    end
  end
end
