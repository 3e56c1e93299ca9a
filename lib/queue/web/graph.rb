# frozen_string_literal: true

module JobQueue
  class Web
    # The history graph without script: processed and failed per day (or per refresh, live), oldest
    # on the left. The bars are an SVG stretched to the box's width; the axis labels are HTML beside
    # it, so text keeps its size on a phone and on a wide screen. Each bar has a tooltip.
    class Graph
      WIDTH = 1000
      HEIGHT = 200

      # series: {"processed" => [[label, count], …], "failed" => [[label, count], …]}, same labels.
      def initialize(series, unit: "day")
        @labels = series.fetch("processed").map(&:first)
        @processed = series.fetch("processed").map(&:last).map(&:to_i)
        @failed = series.fetch("failed").map(&:last).map(&:to_i)
        @unit = unit
      end

      def to_html
        max = nice_max([*@processed, *@failed, 1].max)
        SafeString.new(<<~HTML)
          <div class="graph">
            <div class="y-axis" aria-hidden="true"><span>#{short(max)}</span><span>#{short(max / 2.0)}</span><span>0</span></div>
            #{svg(max)}
            <div class="x-axis" aria-hidden="true"><span>#{esc(@labels.first)}</span><span>#{esc(@labels.last)}</span></div>
          </div>
        HTML
      end

      private

      def svg(max)
        step = WIDTH.to_f / [@labels.size, 1].max
        bar = step * 0.4
        out = [%(<svg viewBox="0 0 #{WIDTH} #{HEIGHT}" preserveAspectRatio="none" role="img" aria-label="processed and failed per #{@unit}">)]
        [0, HEIGHT / 2, HEIGHT].each { |y| out << %(<line class="grid" x1="0" x2="#{WIDTH}" y1="#{y}" y2="#{y}" vector-effect="non-scaling-stroke"/>) }
        @labels.each_with_index do |label, i|
          x = i * step + step * 0.1
          [[@processed[i], "processed", 0], [@failed[i], "failed", bar]].each do |value, css, dx|
            h = (HEIGHT * value / max.to_f).round(2)
            out << %(<rect class="#{css}" x="#{(x + dx).round(2)}" y="#{(HEIGHT - h).round(2)}" width="#{bar.round(2)}" height="#{h}">) +
              %(<title>#{esc(label)}: #{value} #{css}</title></rect>)
          end
        end
        out << "</svg>"
        out.join
      end

      def esc(text) = CGI.escapeHTML(text.to_s)

      def nice_max(value)
        magnitude = 10**Math.log10(value).floor
        [1, 2, 2.5, 5, 10].map { |m| m * magnitude }.find { |v| v >= value }.ceil
      end

      def short(n)
        n = n.round(1)
        n = n.to_i if n == n.to_i
        return "#{(n / 1_000_000.0).round(1)}M" if n >= 1_000_000
        return "#{(n / 1000.0).round(1)}k" if n >= 10_000

        n.to_s
      end
    end
  end
end
