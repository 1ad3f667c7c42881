"""The self-contained HTML page of `nsyswrap report RUN --html PATH`."""

from nsyswrap.html_report.page import html_page, report_with_html

__all__ = ["html_page", "report_with_html"]
